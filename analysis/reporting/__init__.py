"""faultline report by concern (analysis/report.py runs it): inputs (the records the C++
side writes), page (the HTML and its formatting), sim_figures (runs and compared stacks),
study_figures (sweeps and tunings), live_figures (a live state directory)."""
