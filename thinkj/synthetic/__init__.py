"""Generated judging tasks (fruit, facts, constraints) and the scripted R1 teacher that knows their rules: the CPU
scale's data source and teacher endpoint, used by the demo, the CPU rehearsal, experiments and tests."""
