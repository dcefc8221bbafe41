# Per-test properties of the discovered faultline_live_e2e tests (included by ctest after
# the discovered tests; see tests/realexec/live/CMakeLists.txt). A name missing from the
# discovered list (a test renamed or gone) is passed over.
#
# COST, about each test's seconds on the 2-core CI machine: ctest -j2 starts the costliest
# first, so that the long ones do not end up alone at the end. Without it a clean clone (no
# Testing/Temporary/CTestCostData.txt) starts them in declaration order.
#
# RESOURCE_LOCK slurm: each Slurm test runs a Slurm cluster of its own (munged, slurmctld, one
# slurmd per namespace host, each with its files in the test's directory and its ports from
# the network id), but both name their nodes m0..m3, s0 (s1), and each slurmd sees the host's
# whole /sys/fs/cgroup; two such clusters on one host at once were never tried, and the two
# tests take ~27 s together, so they are kept from overlapping each other (nothing else).
set(_faultline_live_e2e_properties
  "LiveHeartbeat.AHostFrozen30sDuringACheckpointSaveIsKeptOneFrozenBeyondTheTimeoutIsEvicted|COST|81"
  "LiveE2E.FaultDrillThePoolHealsItselfAfterEachFault|COST|37"
  "LiveSsh.AnUnreachableSshHostIsReportedByNameAndRetried|COST|33"
  "LiveSsh.TheFaultSuitePassesWithAgentsLaunchedOverSsh|COST|28"
  "LiveSlurm.TheFaultSuitePassesWithAgentsAsJobStepsAndSpareNodesAsStandbys|COST|21"
  "LiveSlurm.TheFaultSuitePassesWithAgentsAsJobStepsAndSpareNodesAsStandbys|RESOURCE_LOCK|slurm"
  "LiveSlurm.ANodeOutsideTheAllocationIsRefusedInOneLine|RESOURCE_LOCK|slurm"
  "LiveAccount.LostTimeCountersContinueAcrossAControllerKilledWithSigkill|COST|20")
foreach(_entry IN LISTS _faultline_live_e2e_properties)
  string(REPLACE "|" ";" _entry "${_entry}")
  list(GET _entry 0 _test)
  list(GET _entry 1 _property)
  list(GET _entry 2 _value)
  list(FIND faultline_live_e2e_TESTS "${_test}" _found)  # (ctest knows no IN_LIST)
  if(NOT _found EQUAL -1)
    set_tests_properties("${_test}" PROPERTIES ${_property} "${_value}")
  endif()
endforeach()
