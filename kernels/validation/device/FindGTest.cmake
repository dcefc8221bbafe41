# GoogleTest comes from the carried source tree (add_subdirectory in ../CMakeLists.txt).
set(GTest_FOUND TRUE)
