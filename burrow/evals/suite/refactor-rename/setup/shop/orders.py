from shop.util import old_name


def order_total():
    return old_name([1, 2, 3])
