package collector

import "strconv"

func strconvG(v float64) string { return strconv.FormatFloat(v, 'g', 12, 64) }
func strconvItoa(i int) string  { return strconv.Itoa(i) }
