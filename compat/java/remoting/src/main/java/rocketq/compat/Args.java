package rocketq.compat;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** One request line: name, key=value words, and after "--" the raw words (mqadmin's argv). */
final class Args {
    final String name;
    final Map<String, String> values = new HashMap<>();
    final List<String> rest = new ArrayList<>();

    private Args(String name) {
        this.name = name;
    }

    static Args parse(String line) {
        String[] words = line.split("\t", -1);
        Args args = new Args(words[0]);
        boolean raw = false;
        for (int i = 1; i < words.length; i++) {
            if (raw) {
                args.rest.add(words[i]);
            } else if (words[i].equals("--")) {
                raw = true;
            } else {
                int eq = words[i].indexOf('=');
                if (eq < 0) {
                    throw new IllegalArgumentException("argument " + i + " of " + args.name + " is not key=value: "
                        + words[i]);
                }
                args.values.put(words[i].substring(0, eq), words[i].substring(eq + 1));
            }
        }
        return args;
    }

    String get(String key) {
        String v = values.get(key);
        if (v == null) {
            throw new IllegalArgumentException(name + " needs " + key + "=...");
        }
        return v;
    }

    String get(String key, String otherwise) {
        return values.getOrDefault(key, otherwise);
    }

    int getInt(String key, int otherwise) {
        return values.containsKey(key) ? Integer.parseInt(values.get(key)) : otherwise;
    }

    long getLong(String key, long otherwise) {
        return values.containsKey(key) ? Long.parseLong(values.get(key)) : otherwise;
    }
}
