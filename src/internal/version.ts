/**
 * The package version, shown in the stats body and the CLI; a test keeps it equal to package.json's.
 *
 * @internal
 */
export const VERSION = "0.1.0"
