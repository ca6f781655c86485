"""Test and benchmark harness for live runs on a local cluster: executor kills (:mod:`.chaos`),
per-executor CPU caps (:mod:`.cpucap`) and imitations of the clouds' notice endpoints
(:mod:`.notice_endpoints`)."""
