"""kudusql: Apache Kudu's storage design with a SQL front end on the Postgres wire.

The Database/Session entry point and the DB-API driver arrive with the SQL front-end issue;
today the package exposes the engine version only.
"""

__version__ = "0.1.0"
