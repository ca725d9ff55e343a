from shop import util


def cart_total():
    return util.old_name([4, 6])
