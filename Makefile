# The two front-door commands: `make serve` and `make test`. Both set everything up first
# (Debian packages, .venv with torch pinned, the project) through scripts/setup.sh.
.PHONY: setup setup-test setup-synth serve test lint typecheck pytest bench-model

setup:
	@bash scripts/setup.sh --serve

setup-synth:  # the corpus workshop and training tools: TTS engines, KenLM's tools, peers
	@bash scripts/setup.sh --synth

setup-test:
	@bash scripts/setup.sh --test

serve: setup
	.venv/bin/harken serve $(ARGS)

test: setup-test
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy models decoder server corpus training evaluation
	.venv/bin/mypy --no-strict-optional --allow-untyped-defs loadtest tests harken_cli.py
	.venv/bin/python -m pytest -q

bench-model: setup
	.venv/bin/harken bench-model --out results
