"""The adapter between Spark and the engine: the engine process and its socket bridge, the
lifetime-history store and its recorder, the ``spark.trspark.*`` settings check, ``configure`` /
``spark_conf`` and the plugin jar build. ``python -m trspark.live`` is the engine process the plugin starts."""
