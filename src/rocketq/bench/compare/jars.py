"""The Java peers' jars: Apache RocketMQ's and Apache Kafka's servers and tools, resolved by Maven.

Each peer has a small Maven project under ``compare/java/<name>/`` whose pom lists the artifacts
(and, for RocketMQ, the sources of the suite's load tool, compiled against the broker's own client
jars).  :func:`build` runs ``mvn compile dependency:build-classpath`` once into a cache directory
outside the source tree (``$XDG_CACHE_HOME/rocketq/bench-java/<name>-<hash>/``, the hash covering
the pom and every source file, so an unchanged project reuses the earlier build) and returns the
classpath; the jars themselves stay in Maven's local repository. A lock file keeps two processes
from building the same directory at once. The first build downloads ~150 MB per peer.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

PROJECTS = Path(__file__).resolve().parent / "java"
BUILD_TIMEOUT_S = 900                  # a cold Maven repository downloads every jar of a broker


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rocketq" / "bench-java"


def missing_java(project: str) -> str | None:
    """None when *project* can be built and run here, else why not."""
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing:
        return (f"{' and '.join(missing)} not on PATH (a JDK 17+ and Maven 3.8+: "
                f"apt-get install openjdk-17-jdk-headless maven)")
    if not (PROJECTS / project / "pom.xml").is_file():
        return f"the Maven project {PROJECTS / project} is not here"
    return None


def unavailable(project: str) -> str | None:
    """None when *project* builds here (building it now if it was not built yet), else why not: what a
    peer's ``available`` says, so a machine without Maven Central skips the peer with the reason."""
    try:
        build(project)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        said = str(e).strip().splitlines() or [type(e).__name__]
        first_error = next((line for line in said if "[ERROR]" in line), "")
        return (f"{said[0]} {first_error}".strip()[:400]
                + f" - the {project} peer runs from jars Maven resolves (Maven Central), so it cannot run here")
    return None


def _tree_hash(project: Path) -> str:
    h = hashlib.sha256()
    for path in sorted([project / "pom.xml", *(project / "src").rglob("*.java")]):
        h.update(str(path.relative_to(project)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def build_command(src: Path, out: Path) -> list[str]:
    """The Maven invocation: compile the project's sources (if any) into *out* and write the
    runtime classpath to ``out/classpath.tmp``."""
    return ["mvn", "-B", "-q", "-f", str(src / "pom.xml"), f"-Dpeer.build.dir={out}",
            f"-Dmdep.outputFile={out / 'classpath.tmp'}", "-Dmdep.includeScope=runtime",
            "compile", "dependency:build-classpath"]


def build(project: str) -> str:
    """The runtime classpath of ``compare/java/<project>`` (its compiled classes first, if it has
    sources). Raises RuntimeError with Maven's words when the build fails."""
    why = missing_java(project)
    if why:
        raise RuntimeError(why)
    src = PROJECTS / project
    out = cache_root() / f"{project}-{_tree_hash(src)}"
    done = out / "classpath.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f"{project}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            out.mkdir(exist_ok=True)
            proc = subprocess.run(build_command(src, out), check=False, capture_output=True, text=True,
                                  timeout=BUILD_TIMEOUT_S)
            if proc.returncode != 0:
                raise RuntimeError(f"maven build of {src} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-1500:]}")
            (out / "classpath.tmp").rename(done)
    classes = out / "classes"
    jars = done.read_text().strip()
    return f"{classes}{os.pathsep}{jars}" if classes.is_dir() else jars
