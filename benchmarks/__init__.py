"""jevrefine's benchmarks: each compares jevrefine with an alternative in the same run."""
