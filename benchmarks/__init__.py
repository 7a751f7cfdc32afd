"""Overhead benchmarks, reported as ratios against baselines measured in the same run."""
