# Benchmarks (issues 6 and 7): `make bench` runs every part, each writing $(RESULTS_DIR)/parts/<part>.json,
# then `bench-report` merges them into $(RESULTS_DIR)/bench.csv + bench.json and prints one table.
# The harness is bench/src/arkouda_bench (see bench/README.md); it runs as root (it creates the unprivileged
# `arkbench` user whose sshd serves every loopback "host").

BENCH_REPEATS ?= 3
BENCH_FANOUT_HOSTS ?= 16,64,256
BENCH_PY = PYTHONPATH=$(REPO_ROOT)/bench/src:$(PYTHONPATH) $(PY) -m arkouda_bench --results-dir $(RESULTS_DIR) --repo-root $(REPO_ROOT)

BENCH_TARGETS += bench-start bench-fanout bench-report
LINT_TARGETS += lint-bench
TEST_TARGETS += test-bench

.PHONY: bench-start bench-fanout bench-report lint-bench test-bench

bench-start: venv
	@rm -rf $(RESULTS_DIR)/parts
	@mkdir -p $(RESULTS_DIR)

bench-fanout: venv ## Issue 7 row: parallel ssh fan-out, OpenSSH default vs ours vs ours+pre-warm (BENCH_FANOUT_HOSTS, BENCH_REPEATS)
	@$(BENCH_PY) fanout --hosts $(BENCH_FANOUT_HOSTS) --repeats $(BENCH_REPEATS)

bench-report: venv ## Merge the bench parts into $(RESULTS_DIR)/bench.{csv,json} and print the table
	@$(BENCH_PY) report

lint-bench: venv ## ruff + mypy --strict on bench/
	@cd $(REPO_ROOT)/bench && ruff check . && ruff format --check . && mypy --strict src tests

test-bench: venv ## Unit tests of the bench harness (no timing is asserted)
	@cd $(REPO_ROOT)/bench && PYTHONPATH=$(REPO_ROOT)/bench/src:$(PYTHONPATH) pytest -q -p no:cacheprovider tests
