# Fails when a file breaks the include rules of docs/architecture.md §2:
# policies/ never includes SimGrid, CUDA, NCCL, nlohmann/json, sockets or <chrono>;
# realexec/ never includes SimGrid or CUDA; only sim/ includes SimGrid; plugins/ (linked
# into faultline-live) includes neither SimGrid nor sim/.
set(bad "")
file(GLOB_RECURSE no_simgrid ${ROOT}/plugins/*.h ${ROOT}/plugins/*.cc ${ROOT}/traces/*.h ${ROOT}/traces/*.cc
     ${ROOT}/eventlog/*.h ${ROOT}/eventlog/*.cc ${ROOT}/scenarios/*.h
     ${ROOT}/scenarios/*.cc ${ROOT}/analysis/*.h ${ROOT}/analysis/*.cc ${ROOT}/kernels/*.h
     ${ROOT}/kernels/*.cc ${ROOT}/kernels/*.cu)
foreach(f IN LISTS no_simgrid)
  file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include")
  foreach(l IN LISTS lines)
    if(l MATCHES "simgrid|\"sim/")
      list(APPEND bad "${f}: ${l}")
    endif()
  endforeach()
endforeach()
file(GLOB_RECURSE policy_files ${ROOT}/policies/*.h ${ROOT}/policies/*.cc)
foreach(f IN LISTS policy_files)
  file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include")
  foreach(l IN LISTS lines)
    if(l MATCHES "simgrid|cuda|nccl|nlohmann|sys/socket|netinet|<chrono>")
      list(APPEND bad "${f}: ${l}")
    endif()
  endforeach()
endforeach()
file(GLOB_RECURSE live_files ${ROOT}/realexec/*.h ${ROOT}/realexec/*.cc)
foreach(f IN LISTS live_files)
  file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include")
  foreach(l IN LISTS lines)
    if(l MATCHES "simgrid|cuda_runtime|cuda\\.h|nccl|\"sim/")
      list(APPEND bad "${f}: ${l}")
    endif()
  endforeach()
endforeach()
# sim/ sees a policy only as the World's other side: the policy API, the module interfaces
# and the registry of built-in stacks and modules (to build and list them), never a stack's
# or a module's own header, so that a stack changes without the simulator noticing.
# analysis/ also evaluates three modules' closed-form planning math on purpose (the Daly
# interval, the standby pool's binomial sizing, dual-phase replay's plan): those headers
# and no others. cli/ (the `faultline` program, whose `analyze` commands evaluate the same
# math) keeps the rules of both.
file(GLOB_RECURSE sim_files ${ROOT}/sim/*.h ${ROOT}/sim/*.cc)
file(GLOB_RECURSE analysis_files ${ROOT}/analysis/*.h ${ROOT}/analysis/*.cc ${ROOT}/cli/*.h ${ROOT}/cli/*.cc)
set(policies_seen_by_all "policies/api/|policies/module\\.h|policies/builtin\\.h")
set(policies_math "policies/checkpoint/plans\\.h|policies/recovery/standby\\.h|policies/localization/localization\\.h")
foreach(f IN LISTS sim_files analysis_files)
  file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"policies/")
  foreach(l IN LISTS lines)
    if(l MATCHES "\"(${policies_seen_by_all})")
      continue()
    endif()
    if(f MATCHES "/(analysis|cli)/" AND l MATCHES "\"(${policies_math})")
      continue()
    endif()
    list(APPEND bad "${f}: ${l} (sim/, analysis/ and cli/ see policies through policies/api/, module.h and builtin.h)")
  endforeach()
endforeach()
if(bad)
  string(REPLACE ";" "\n" msg "${bad}")
  message(FATAL_ERROR "include rule broken:\n${msg}")
endif()
message(STATUS "include rules hold")
