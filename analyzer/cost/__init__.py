"""The cost model: what each path executes, and what that costs in ns on a calibrated kernel.

One module per step, in the order they run:

* count.py: explore a program counting what each path executes (a counter vector per path);
* profile.py: prices per counted thing, measured on one machine (the shipped default is
  analyzer/profiles/default.json);
* price.py: a counter vector's ns under a profile, every path's min/median/max;
* tailgraph.py: programs that tail-call each other priced end to end (chains, cycles);
* report.py: the `cost` report (JSON schema `xdp2tc.cost/1`, and text);
* calibrate.py: measuring a profile on the running kernel (micro-programs), and fitting it
  on real paths: pathtiming.py times them, fit.py fits the instruction prices.
"""
