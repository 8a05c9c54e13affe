#!/usr/bin/env bash
# Call 2 (carry build-carry/cu13.partaa): the first half of FA4's cu13 libraries (xz) into
# /tmp, where call 3 finds it on the same warm machine.
cp build-carry/cu13.partaa /tmp/ && ls -la /tmp/cu13.partaa && ls -d /tmp/pkg-D
