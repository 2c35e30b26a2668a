"""ProverBench / VerifierBench scoring, the LiveMathematicianBench MCQ harness, reports."""
