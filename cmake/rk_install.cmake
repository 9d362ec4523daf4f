# What 'cmake --install' puts where, for projects that build on librdmakit
# (the library targets themselves are installed by lib/CMakeLists.txt).
include(CMakePackageConfigHelpers)

install(DIRECTORY include/rdmakit DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# pkg-config: libdir and includedir relative to the .pc file's own
# directory (${pcfiledir}) when they lie under the prefix, so the file does
# not name the prefix CMake was configured with. A distribution's package
# (debian/rules) turns that off: its files never move, and pkg-config leaves
# out its default directories (-I/usr/include) only when spelt as such.
option(RK_PC_RELOCATABLE "rdmakit.pc finds its prefix from its own place" ON)
set(rk_pcdir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
	set(RK_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
	set(RK_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
	set(RK_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
else()
	if(RK_PC_RELOCATABLE)
		file(RELATIVE_PATH rk_up /rk/${rk_pcdir} /rk)
		string(REGEX REPLACE "/$" "" rk_up "${rk_up}")
		set(RK_PC_PREFIX "\${pcfiledir}/${rk_up}")
	else()
		set(RK_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
	endif()
	set(RK_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
	set(RK_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/rdmakit.pc.in ${PROJECT_BINARY_DIR}/rdmakit.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/rdmakit.pc DESTINATION ${rk_pcdir})

# CMake: find_package(rdmakit CONFIG) -> rdmakit::rdmakit, rdmakit::rdmakit_static.
# Before 1.0 a minor version may change the API: only the same MAJOR.MINOR is compatible.
set(rk_cmakedir ${CMAKE_INSTALL_LIBDIR}/cmake/rdmakit)
install(EXPORT rdmakitTargets NAMESPACE rdmakit:: DESTINATION ${rk_cmakedir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/rdmakitConfig.cmake.in
	${PROJECT_BINARY_DIR}/rdmakitConfig.cmake INSTALL_DESTINATION ${rk_cmakedir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/rdmakitConfigVersion.cmake
	VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/rdmakitConfig.cmake ${PROJECT_BINARY_DIR}/rdmakitConfigVersion.cmake
	DESTINATION ${rk_cmakedir})

# rk serve as a service: the systemd unit (ExecStart names rk where this
# prefix installs it) and an example configuration file.
file(READ ${PROJECT_SOURCE_DIR}/dist/systemd/rdmakit-serve@.service rk_unit)
string(REPLACE "ExecStart=/usr/bin/rk " "ExecStart=${CMAKE_INSTALL_FULL_BINDIR}/rk " rk_unit
	"${rk_unit}")
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/dist/rdmakit-serve@.service CONTENT "${rk_unit}")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
	${PROJECT_SOURCE_DIR}/dist/systemd/rdmakit-serve@.service)
install(FILES ${PROJECT_BINARY_DIR}/dist/rdmakit-serve@.service
	DESTINATION lib/systemd/system) # under the prefix, also with cmake --install --prefix
install(FILES ${PROJECT_SOURCE_DIR}/dist/systemd/serve.conf.example
	DESTINATION ${CMAKE_INSTALL_DOCDIR})
