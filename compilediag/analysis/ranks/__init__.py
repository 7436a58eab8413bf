"""A job's ranks: each rank's trace folded into a digest and the job's report
(`fold`), and where ranks diverge (`ranks`).
"""
