"""The lab: studies built on purehr (ablations, comparisons, the optimal-control references),
their command lines (studies/scripts/) and tests (studies/tests/). Not installed and never
imported by purehr (tests/test_layering.py checks); see studies/README.md."""
