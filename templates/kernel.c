/*
$header
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
$helpers
$structs
$signature
{
$body
}
