# Thin wrapper over scripts/ and CMake.
.PHONY: all build test run format clean
all: build
build:
	scripts/build.sh
test:
	scripts/test.sh
run:
	scripts/run.sh
format:
	clang-format -i $$(git ls-files '*.cc' '*.h' '*.cu' '*.cuh')
clean:
	rm -rf build
