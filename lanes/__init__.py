"""Lanes: running the exact and fast lanes (running/), where a request runs (backends/), the models
(models/), negative controls (controls/) and simulated devices (simulation/)."""

from lanes.import_paths import install

install()
