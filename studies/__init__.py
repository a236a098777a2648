"""Studies and probes: the conditioning and paper studies, κ and Hessian measurements, where a
step's time goes. Their records are JSON files in benchmarks/; run from the repository root:
``python -m studies.NAME --help``.
"""
