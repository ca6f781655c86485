"""TR-Spark policy (paper §3-§5): TR-Checkpointing, the backup stack, TR-Scheduling hints,
the safety belt, task duplication and splitting advice, over a lifetime-knowledge variant."""
