"""IFBench (Allen AI's instruction-following benchmark) as a jevrefine case file.

`data/IFBench_test.jsonl` is the benchmark's 294 test prompts, unchanged; `convert.py` turns the
ones whose verifiers run offline into `cases.jsonl`; `verify.py` adapts IFBench's verifiers
(`if-verifiable`) to `python` assertions. See `README.md` for the sources and licences.
"""
