/*
$header
 */
#include <stdint.h>
#include <string.h>
$helpers
$structs
$signature
{
$body
}
