"""What every Epochal service runs on: settings as flags and environment variables
(``flags``), the service entry (``service``: logging, signals, serve until stopped, a bounded
graceful stop), the database engine and Alembic runner (``database``), local processes
(``processes``), and the metadata follower (``follower``) of every node that follows the log."""
