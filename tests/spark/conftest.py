"""Fixtures: one database + Arrow Flight server per test module, one local SparkSession
per test session (started only by the tests that need it)."""

from __future__ import annotations

import pytest

from kudusql.session import Database
from wire import arrow_stream


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    d = Database.open(str(tmp_path_factory.mktemp("spark-db")), maintenance=False)
    yield d
    d.close()


@pytest.fixture(scope="module")
def server(db):
    s = arrow_stream.start_endpoints(db)
    yield s
    s.shutdown()


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark", reason="pyspark>=4 is not installed (pip install "
                                          "'kudusql[spark]')")
    from kudusql.spark import SparkEnvironmentError, check_environment

    try:
        check_environment()
    except SparkEnvironmentError as e:
        pytest.skip(f"Spark cannot run here: {e}")
    from kudusql.spark import local_session

    s = local_session("local[2]", app_name="kudusql-tests",
                      **{"spark.sql.execution.arrow.maxRecordsPerBatch": "10000"})
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def jvm(spark):
    """The Spark session, with the JVM connector on its classpath (else the test skips)."""
    from kudusql.spark import jvm_connector_loaded

    if not jvm_connector_loaded(spark):
        pytest.skip("the JVM connector is not on the classpath (no JDK to build it)")
    return spark


@pytest.fixture
def history_age(db):
    """A setter of `db`'s history_max_age_s for one test, restored after it (an idle change
    stream's tests need a mark that passes in seconds). Every tablet of the catalog reads
    the one TabletConfig, a frozen dataclass: set in place, as no engine code does."""
    cfg = db.catalog.config
    old = cfg.history_max_age_s

    def set_age(seconds: float) -> None:
        object.__setattr__(cfg, "history_max_age_s", float(seconds))
    yield set_age
    set_age(old)
