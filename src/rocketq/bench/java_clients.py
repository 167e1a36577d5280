"""Apache RocketMQ's Java clients as subprocesses: build the Maven projects under ``compat/java`` once,
and drive one JVM per client line. Used by the reference-client suite (tests/compat) and by
``rocketq bench grpc --java``, which is why it lives in the package.

Building: ``mvn compile dependency:build-classpath`` into ``compat/.build/<project>-<profile>-<hash>/``,
where the hash covers the pom and every source file, so an unchanged tree reuses the classes and
classpath of an earlier run (the first run downloads the clients from Maven Central into ~/.m2, about
a minute). A lock file keeps two processes from building the same directory at once.

Running: :class:`JavaRunner` starts ``java rocketq.compat.Runner`` (or the gRPC runner), writes one
request per line (tab-separated: scenario, key=value words, ``--`` and raw words for mqadmin) and
reads the ``@@RESULT`` line that answers it. One JVM serves every scenario of a client line, since a
JVM with the client loaded takes seconds to start. A request that outlives its timeout kills the JVM
(its state is unknown) and fails; the next request starts a fresh one.

The Java sources are not part of the wheel: outside a source checkout :func:`missing_java` says so.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
JAVA_DIR = REPO / "compat" / "java"
BUILD_ROOT = REPO / "compat" / ".build"
ROCKETMQ_HOME = JAVA_DIR / "rocketmq_home"      # mqadmin reads conf/logback_tools.xml under it
BUILD_TIMEOUT_S = 600                          # a cold ~/.m2 downloads ~60 MB per client line
JVM_READY_TIMEOUT_S = 60
RESULT_PREFIX = "@@RESULT "
# The test suite's JVMs run short scenarios: C1 only and a small serial heap start fastest.
FAST_START_JVM = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx512m")
# A benchmark's JVM runs long enough for C2 to pay; a fixed heap keeps resizing out of the timings.
BENCH_JVM = ("-XX:+UseParallelGC", "-Xms1g", "-Xmx1g")


def missing_java() -> str | None:
    """None when the Java scenarios can be built and run here, else why not."""
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing:
        return (f"{' and '.join(missing)} not on PATH: the Java reference-client scenarios (compat/java) need a "
                f"JDK 17+ and Maven 3.8+ (Debian: apt-get install openjdk-17-jdk-headless maven)")
    if not JAVA_DIR.is_dir():
        return f"the Java scenario sources ({JAVA_DIR}) are not here: run from a source checkout of rocketq"
    return None


class JavaUnavailable(RuntimeError):
    pass


def _tree_hash(project: Path, profile: str) -> str:
    h = hashlib.sha256(profile.encode())
    for path in sorted([project / "pom.xml", *(project / "src").rglob("*.java")]):
        h.update(str(path.relative_to(project)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def build(project: str, profile: str | None = None) -> tuple[Path, str]:
    """(classes directory, classpath) of compat/java/<project> built with the Maven profile."""
    why = missing_java()
    if why:
        raise JavaUnavailable(why)
    src = JAVA_DIR / project
    out = BUILD_ROOT / f"{project}-{profile or 'default'}-{_tree_hash(src, profile or '')}"
    done = out / "classpath.txt"
    BUILD_ROOT.mkdir(parents=True, exist_ok=True)
    with open(BUILD_ROOT / f"{project}-{profile}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            args = ["mvn", "-B", "-q", "-f", str(src / "pom.xml"), f"-Dcompat.build.dir={out}",
                    f"-Dmdep.outputFile={out / 'classpath.tmp'}", "compile", "dependency:build-classpath"]
            if profile:
                args[1:1] = ["-P", profile]
            proc = subprocess.run(args, check=False, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
            if proc.returncode != 0:
                raise RuntimeError(f"maven build of {src} ({profile}) failed:\n{proc.stdout[-4000:]}"
                                   f"\n{proc.stderr[-2000:]}")
            (out / "classpath.tmp").rename(done)
    return out / "classes", done.read_text().strip()


class ScenarioFailed(AssertionError):
    pass


class JavaRunner:
    """One JVM running scenarios on request."""

    def __init__(self, project: str, profile: str | None, main_class: str, logdir: Path,
                 jvm_args: tuple[str, ...] = FAST_START_JVM):
        self.classes, self.classpath = build(project, profile)
        self.main_class, self.logdir, self.jvm_args = main_class, logdir, jvm_args
        self.name = f"{project}-{profile or 'default'}"
        self.proc: subprocess.Popen | None = None
        self.lines: queue.Queue[str | None] = queue.Queue()

    def _start(self) -> None:
        self.logdir.mkdir(parents=True, exist_ok=True)
        home = self.logdir / "rocketmq_home"         # a copy: the ACL scenarios write conf/tools.yml into it
        shutil.copytree(ROCKETMQ_HOME, home, dirs_exist_ok=True)
        self.stderr_path = self.logdir / f"{self.name}.stderr"
        args = ["java", "-Xss512k", *self.jvm_args,
                "-cp", f"{self.classes}{os.pathsep}{self.classpath}",
                f"-Drocketmq.client.logRoot={self.logdir / 'client-logs'}", "-Drocketmq.client.logLevel=WARN",
                f"-Drocketmq.log.root={self.logdir / 'client-logs'}", "-Drocketmq.log.level=warn",   # 5.x
                f"-Drocketmq.home.dir={home}", f"-Duser.home={self.logdir}",
                f"-Drocketmq.client.localOffsetStoreDir={self.logdir / 'offsets'}",
                # the client rebalances every 20 s by default; an orderly consumer that could not lock a queue
                # waits that long before it tries again (a client knob, not the broker's)
                "-Drocketmq.client.rebalance.waitInterval=1000",
                "-Djava.security.manager=allow",     # mqadmin's System.exit becomes an exception (AdminScenarios)
                self.main_class]
        with open(self.stderr_path, "ab") as stderr:          # the JVM keeps its own copy of the descriptor
            self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                         text=True, encoding="utf-8", env=dict(os.environ, ROCKETMQ_HOME=str(home)))
        self.lines = queue.Queue()
        threading.Thread(target=self._read, args=(self.proc, self.lines), daemon=True).start()
        ready = self._next_result(JVM_READY_TIMEOUT_S, "ready")
        assert ready.get("ok"), ready

    @staticmethod
    def _read(proc: subprocess.Popen, lines: queue.Queue) -> None:
        for line in proc.stdout:
            if line.startswith(RESULT_PREFIX):
                lines.put(line[len(RESULT_PREFIX):])
        lines.put(None)

    def _next_result(self, timeout_s: float, what: str) -> dict:
        try:
            line = self.lines.get(timeout=timeout_s)
        except queue.Empty:
            self.close(kill=True)
            raise ScenarioFailed(f"{self.name}: {what} gave no result within {timeout_s} s\n{self.stderr_tail()}")
        if line is None:
            self.proc = None
            raise ScenarioFailed(f"{self.name}: the JVM exited during {what}\n{self.stderr_tail()}")
        return json.loads(line)

    def stderr_tail(self, chars: int = 3000) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-chars:]
        except (OSError, AttributeError):
            return ""

    def start(self) -> None:
        """Start the JVM unless it is running (``run`` does that too)."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()

    def run(self, scenario: str, *, timeout_s: float = 60, raw: list[str] | None = None, **args) -> dict:
        """Run *scenario*; return its data, or raise with the Java stack trace."""
        self.start()
        words = [scenario] + [f"{k}={v}" for k, v in args.items()]
        if raw is not None:
            words += ["--", *raw]
        assert all("\t" not in w and "\n" not in w for w in words), words
        started = time.monotonic()
        self.proc.stdin.write("\t".join(words) + "\n")
        self.proc.stdin.flush()
        result = self._next_result(timeout_s, scenario)
        if not result.get("ok"):
            raise ScenarioFailed(f"{self.name} {scenario} failed after {time.monotonic() - started:.1f} s:\n"
                                 f"{result.get('error')}")
        return result["data"]

    def mqadmin(self, *argv: str, timeout_s: float = 30, **args) -> str:
        data = self.run("mqadmin", raw=list(argv), timeout_s=timeout_s, **args)
        return data["stdout"] + data["stderr"]

    def close(self, kill: bool = False) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            if not kill:
                proc.stdin.write("exit\n")
                proc.stdin.flush()
                proc.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        if proc.poll() is None:
            proc.kill()
            proc.wait()
