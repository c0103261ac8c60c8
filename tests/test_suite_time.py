"""bench/suite_time.py's account of the time outside the cases, from a store alone (issue 38: 16.2 s of the
4-GPU run's 192 s were outside its cases)."""
from conftest import bench_module


def test_the_time_between_cases_is_split_into_process_starts_and_the_rest():
    st = bench_module("suite_time")
    run = {"started": 100.0, "finished": 120.0}
    cases = [{"started": 100.5, "elapsed": 2.0}, {"started": 102.52, "elapsed": 1.0},   # 20 ms: same batch
             {"started": 104.52, "elapsed": 3.0},                                       # 1 s: a process started
             {"started": 107.56, "elapsed": 10.0}, {"started": None, "elapsed": None}]  # 40 ms; one never ran
    b = st.between(run, cases)
    assert b == {"to_first_case_s": 0.5, "process_starts": 1, "process_starts_s": 1.0, "other_gaps": 2,
                 "other_gaps_s": 0.06, "other_gap_median_ms": 30.0, "after_last_case_s": 2.44}
    assert "1 pauses of 0.2 s or more" in st.between_text(b) and st.between_text({}) == ""
