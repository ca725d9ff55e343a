def f():
	x = 1
	for i in range(3):
		x += i
	return x + 2


print(f() + 1)
