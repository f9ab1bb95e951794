# Run when an embedded file changes (cmake -DIN=<file> -DOUT=<inc> -P embed_asset.cmake): writes
# OUT, the bytes of IN as a comma-separated list of unsigned char constants ending with a NUL
# (the initializer of a `static constexpr unsigned char x[] = { #include OUT };`), so a file
# of any size and content compiles (no string-literal length limit, no escaping, no charset
# conversion) and the program holds exactly IN's bytes. IN must not contain a NUL byte (it is
# returned as a C string).
if(NOT DEFINED IN OR NOT DEFINED OUT)
  message(FATAL_ERROR "embed_asset.cmake: pass -DIN=<file> -DOUT=<inc>")
endif()
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
if(bytes MATCHES "0x00,")
  message(FATAL_ERROR "embed_asset.cmake: ${IN}: contains a NUL byte (embedded files are C strings)")
endif()
# 16 bytes a line (CMake's regular expressions have no {n}).
string(REPEAT "0x..," 16 line)
string(REGEX REPLACE "(${line})" "\\1\n" bytes "${bytes}")
get_filename_component(name "${IN}" NAME)
file(WRITE "${OUT}" "// Generated from ${name} by cmake/embed_asset.cmake: do not edit.\n${bytes}\n0x00\n")
