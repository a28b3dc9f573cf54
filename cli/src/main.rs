mod handlers;

fn main() {}
