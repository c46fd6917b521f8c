"""LoCoMo: memory quality on the public long-conversation benchmark (and a synthetic stand-in).

`bench.locomo.dataset` reads the `locomo10.json` format, `bench.locomo.scoring` scores answers
as the LoCoMo paper and mem0's evaluation do, `bench.locomo.answering` asks the answer and judge
LLMs, `bench.locomo.pipeline` feeds conversations through a running memstream pipeline, and
`bench.locomo.run` is the command line. See BENCHMARKS.md, "LoCoMo".
"""
