"""The window around the tabs: the main window, its menus and File actions, the tab hosts, the status
bar, the window's settings, Help, the crash report and ``launch()``."""
