#pragma once

#include <QDialog>

class QDialogButtonBox;
class QFormLayout;
class QLabel;

namespace once::ui {

// What the dialogs that open a store or a queue share: a form of connection fields, a
// preview of what will be opened (as the window will name it, without the password), a
// note on what happens to the password, and Open, enabled only for something openable.
class ConnectionDialog : public QDialog
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(ConnectionDialog)

protected:
    explicit ConnectionDialog(QWidget *parent);

    // Puts the preview under the form's fields, then the note and the buttons.
    void layOut(QFormLayout *form, const QString &previewLabel, const QString &passwordNote, int minimumWidth);
    void setPreview(const QString &text, bool openable);
    QLabel *preview() const { return m_preview; }

private:
    QLabel *m_preview = nullptr;
    QDialogButtonBox *m_buttons = nullptr;
};

} // namespace once::ui
