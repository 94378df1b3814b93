"""IFEval (Google's Instruction-Following Eval) as a jevrefine case file.

`data/input_data.jsonl` is the benchmark's 541 prompts, unchanged; `convert.py` turns the ones
whose verifiers check them offline and as written into `cases.jsonl`; `verify.py` adapts IFEval's
verifiers (`if-verifiable`) to `python` assertions. See `README.md` for the sources and licences.
"""
