set -u
export PYTHONPATH=.:tests/fixtures/run_jobs COLUMNS=110
python3 -m pytest -q -s -m "gpu" -p no:cacheprovider -n 0 tests/analysis/step/test_kernel_advice.py tests/analysis/step/test_verdict.py 2>&1 | tee $OUT/pytest.log | tail -30
