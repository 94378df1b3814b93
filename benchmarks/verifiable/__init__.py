"""What the verifiable-instruction benchmarks (IFBench, IFEval) share.

Both ship their prompts as JSONL rows (`key`, `prompt`, `instruction_id_list`, `kwargs`) and their
verifiers in `if-verifiable` 0.1.2. `verifiers.py` runs one benchmark's verifiers (strict, as
jevrefine `python` assertions); `cases.py` turns one benchmark's rows into a jevrefine case file.
`benchmarks/ifbench/` and `benchmarks/ifeval/` each hold their data and name their settings.
"""
