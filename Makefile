# Thin wrapper over scripts/ and CMake.
PREFIX ?= /usr/local
.PHONY: all build test run install package format clean
all: build
build:
	scripts/build.sh
test:
	scripts/test.sh
run:
	scripts/run.sh
install: build
	cmake --install build --prefix $(PREFIX)
package: build
	cd build && cpack -G DEB
format:
	clang-format -i $$(git ls-files '*.cc' '*.h' '*.cu' '*.cuh')
clean:
	rm -rf build
