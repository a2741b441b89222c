"""JARs from Maven Central: fetched once with Maven, from version-pinned recipes, into a folder
that is reused while its recipe is unchanged.

Each bundle is a small POM in medallion_cli/spark/maven/ listing exactly the JARs it needs (Spark already
ships Scala, Hadoop, Jackson and the rest, so the Spark-side bundles take nothing transitively).
`mvn dependency:copy-dependencies` copies them: the ordinary Maven client, with the machine's own
settings (mirrors, proxies) and its local repository as a cache. Before Spark is given a JAR built
for Spark, `check_spark_jars` makes sure it was built for the installed Spark and Scala.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from importlib.metadata import version
from pathlib import Path

from ..core.errors import MedallionError
from ..core.locations import on_s3
from ..core.project import Project, Target

RECIPES = Path(__file__).resolve().parent / "maven"
BUNDLES = ("delta", "kafka", "s3", "kafka-broker", "hive-metastore", "trino")
CACHE_ENV = "MEDALLION_JARS_DIR"
DONE = ".complete"  # written last: a folder without it was cut off and is fetched again
# delta-spark_4.1_2.13-4.1.0.jar (built per Spark release), delta-spark_2.13-4.0.0.jar (one Spark
# per Delta release), spark-sql-kafka-0-10_2.13-4.1.3.jar (versioned with Spark itself).
SPARK_BUILT = re.compile(r"^(?P<name>delta-spark|spark-[\w-]+?)(?:_(?P<spark>\d+\.\d+))?"
                         r"_(?P<scala>2\.1[23])-(?P<version>[\w.-]+)\.jar$")
DELTA_FOR_SPARK = {"3": "3.5", "4.0": "4.0"}  # Delta releases without a Spark segment


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "medallion" / "jars")


def recipe(bundle: str) -> Path:
    if bundle not in BUNDLES:
        raise MedallionError(f"no JAR bundle named '{bundle}'", hint="bundles: " + ", ".join(BUNDLES))
    return RECIPES / f"{bundle}.pom.xml"


def folder(bundle: str) -> Path:
    """Where the bundle's JARs are kept: named by the recipe's content, so a changed pin is a
    new folder and an old one is never mixed with it."""
    digest = hashlib.sha256(recipe(bundle).read_bytes()).hexdigest()[:10]
    return cache_root() / f"{bundle}-{digest}"


def present(bundle: str) -> Path | None:
    """The bundle's folder if a fetch into it finished, else None."""
    where = folder(bundle)
    return where if (where / DONE).is_file() else None


def fetch(bundle: str) -> Path:
    """The bundle's folder, fetching its JARs with Maven first when it is not there yet."""
    done = present(bundle)
    if done:
        return done
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MedallionError(
            f"Maven (mvn) was not found, and the {bundle} JARs are not in {folder(bundle)} yet",
            hint="install Maven (e.g. apt-get install maven), or fetch the JARs listed in "
                 f"{recipe(bundle)} by hand into that folder")
    where = folder(bundle)
    where.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{bundle}-", dir=where.parent))
    staging.chmod(0o755)
    try:
        run = subprocess.run(
            [mvn, "-B", "-q", "-f", str(recipe(bundle)), "dependency:copy-dependencies",
             f"-DoutputDirectory={staging}", "-DincludeScope=runtime"],
            capture_output=True, text=True)
        if run.returncode != 0:
            lines = [ln for ln in (run.stdout + run.stderr).splitlines() if "ERROR" in ln]
            raise MedallionError(
                f"Maven could not fetch the {bundle} JARs: "
                + (lines[0].replace("[ERROR]", "").strip() if lines else f"exit {run.returncode}"),
                path=recipe(bundle),
                hint="check that Maven reaches Maven Central (or your mirror in ~/.m2/settings.xml)")
        jars = sorted(p.name for p in staging.glob("*.jar"))
        (staging / DONE).write_text("\n".join(jars) + "\n")
        try:
            staging.rename(where)  # atomic: another fetch that finished first wins
        except OSError:
            if not present(bundle):
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return where


def jar_files(location: str | Path) -> list[Path]:
    return sorted(Path(location).glob("*.jar"))


def pyspark_folder() -> Path:
    """The installed pyspark's folder, found without importing it: importing pyspark here
    could race a node's first import of it."""
    spec = importlib.util.find_spec("pyspark")
    assert spec is not None and spec.origin is not None  # a dependency, a regular package
    return Path(spec.origin).parent


def installed_spark() -> tuple[str, str]:
    """(Spark major.minor, Scala binary version) of the installed pyspark, read without a JVM."""
    home = pyspark_folder()
    scala = next((m.group(1) for p in (home / "jars").glob("scala-library-*.jar")
                  if (m := re.match(r"scala-library-(\d+\.\d+)", p.name))), "2.13")
    return ".".join(version("pyspark").split(".")[:2]), scala


def installed_hadoop() -> str:
    """The Hadoop version inside the installed pyspark, from its client JAR's name."""
    home = pyspark_folder()
    return next((m.group(1) for p in (home / "jars").glob("hadoop-client-api-*.jar")
                 if (m := re.match(r"hadoop-client-api-([\d.]+)\.jar$", p.name))), "?")


def bundles_for(project: Project) -> list[str]:
    """The bundles a project's Spark needs beyond its engine's own: Spark's Kafka source for
    Kafka sources, S3A for a warehouse or sources on S3 (unless the target brings its own
    hadoop-aws, as clusters with S3 do). None for a Spark Connect server: it has its own."""
    if project.target.spark_remote:
        return []
    sources = project.sources.values()
    kafka = any(source.format == "kafka" for source in sources)
    own = " ".join(project.target.spark_conf.get(key, "")
                   for key in ("spark.jars", "spark.jars.packages"))
    s3 = "hadoop-aws" not in own and any(
        on_s3(where) for where in [project.target.warehouse, *(s.path for s in sources)])
    return ["kafka"] * kafka + ["s3"] * s3


def built_for(jar: Path) -> tuple[str, str, str | None] | None:
    """(artifact, Scala version, Spark major.minor) a Spark-side JAR was built for, from its
    Maven file name; None for JARs that are not built per Scala (delta-storage, kafka-clients)."""
    match = SPARK_BUILT.match(jar.name)
    if not match:
        return None
    spark = match["spark"]
    if spark is None and match["name"].startswith("delta"):  # Delta Lake for Spark's JAR
        version = match["version"]
        spark = DELTA_FOR_SPARK.get(version[:3]) or DELTA_FOR_SPARK.get(version[:1])
    elif spark is None:
        spark = ".".join(match["version"].split(".")[:2])  # Spark's own modules: Spark's version
    return match["name"], match["scala"], spark


def check_spark_jars(jars: list[Path], where: str, hint: str, subject: str = "") -> None:
    """Fail, naming the JAR (and the subject, e.g. a target), when one was built for another
    Spark or Scala than the installed."""
    spark, scala = installed_spark()
    hadoop = installed_hadoop()
    for jar in jars:
        aws = re.match(r"hadoop-aws-([\d.]+)\.jar$", jar.name)
        if aws and aws.group(1) != hadoop:
            raise MedallionError(f"{subject}{jar.name} is for Hadoop {aws.group(1)}, but this "
                                 f"Spark's Hadoop is {hadoop}", path=where, hint=hint)
        built = built_for(jar)
        if built is None:
            continue
        name, jar_scala, jar_spark = built
        if jar_scala != scala or (jar_spark is not None and jar_spark != spark):
            raise MedallionError(
                f"{subject}{jar.name} is built for Spark {jar_spark or '?'} with Scala {jar_scala}, but "
                f"this Spark is {spark} with Scala {scala}", path=where, hint=hint)


def with_bundles(target: Target, bundles: list[str]) -> Target:
    """The target with the bundles' JARs (fetched when not here yet, checked against this
    Spark) added to its spark.jars: e.g. Spark's Kafka source for a project with Kafka sources."""
    from dataclasses import replace

    if not bundles:
        return target
    found = [jar for bundle in bundles for jar in jar_files(fetch(bundle))]
    check_spark_jars(found, str(recipe(bundles[0])), "delete the folder and run medallion jars "
                     "again, or fix the pinned versions in the recipe")
    own = target.spark_conf.get("spark.jars")
    jar_list = ",".join([str(p) for p in found] + ([own] if own else []))
    return replace(target, spark_conf={**target.spark_conf, "spark.jars": jar_list})


def jars_fix(target: Target) -> str:
    return (f"run `medallion jars` (it fetches them with Maven into {folder('delta')}, "
            f"used when the target has no delta_jars), or name a folder of delta-spark and "
            f"delta-storage JARs built for this Spark as delta_jars in target '{target.name}', or "
            "use a cluster that ships Delta (e.g. Databricks)")


def delta_jar_files(target: Target) -> list[Path]:
    """The Delta JARs to give Spark: the target's delta_jars folder, else the one `medallion
    jars` fills. Checked against the installed Spark before any JVM starts."""
    if target.delta_jars:
        found = jar_files(target.delta_jars)
        if not found:
            raise MedallionError(
                f"target '{target.name}': delta_jars names {target.delta_jars}, which has no "
                ".jar files", path=target.profiles_file, hint=jars_fix(target))
    else:
        folder = present("delta")
        found = jar_files(folder) if folder else []
    check_spark_jars(found, target.profiles_file or "profiles.yml", jars_fix(target),
                     f"target '{target.name}': ")
    return found
