#!/usr/bin/env node
/**
 * The `queen-mesh` command line.
 *
 * @since 0.1.0
 */
process.stdout.write("usage: queen-mesh <node|stats|demo>\n")
