# Source list of faultline_traces, shared with the clang-built fuzz targets
# (tests/fuzz), which compile the same files with sanitizers.
set(FAULTLINE_TRACES_SOURCES
  arrivals.cc
  category_map.cc
  column_map.cc
  config.cc
  fit.cc
  fit_trace.cc
  issues.cc
  model.cc
  readers.cc
  record_interpreter.cc
  scan.cc
  stats.cc
  timefmt.cc
  trace.cc
  writers.cc)
