from pkg.helper import VALUE
