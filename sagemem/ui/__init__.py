"""`sagemem ui`: the local web page. A front end: the library never imports it."""
