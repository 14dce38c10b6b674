# Experiment families a config leaves out, or whose declaration has no workflow yet: each target
# writes tables that say "not implemented yet", with no numbers.


if PENDING_EXPERIMENTS:

  localrules: pending_experiment

  rule pending_experiment:
      output:
          csv=f"{RESULTS}/{{pending}}/speedup.csv",
          md=f"{RESULTS}/{{pending}}/speedup.md",
          tex=f"{RESULTS}/{{pending}}/speedup.tex",
          summary=f"{RESULTS}/{{pending}}/summary.json",
      log:
          f"{RESULTS}/logs/pending_experiment/{{pending}}.log",
      wildcard_constraints:
          pending="|".join(PENDING_EXPERIMENTS),
      script:
          "../scripts/pending_experiment.py"
