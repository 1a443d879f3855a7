"""The benchmark kit behind Scripts/bench and Scripts/bench-capture-encode (benchmarks, never tests)."""
