"""Benchmarks: run each as `python -m bench.<name>`.

`python bench/bench_habits.py`: model calls and tokens per task for a mixed-habit
run of 36 tasks on 3 agents (see its docstring for the mix and the targets).
"""
